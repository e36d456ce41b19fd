// Copies the kplug.v1 contract into this package (proto/, published with it)
// and generates the TypeScript messages and grpc-js service definitions from
// it into src/gen/ with buf and ts-proto. Neither directory is committed.
//
// In a checkout, the source of truth is ../../proto/kplug; in an unpacked
// package (no ../../proto), the copy shipped in proto/ is used as is.
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const source = join(root, "..", "..", "proto", "kplug");
const copy = join(root, "proto", "kplug");

if (existsSync(source)) {
  rmSync(copy, { recursive: true, force: true });
  cpSync(source, copy, {
    recursive: true,
    filter: (path) => !path.endsWith(".rs"),
  });
} else if (!existsSync(copy)) {
  console.error(
    `no protos: neither ${source} (a kplug checkout) nor ${copy} (a packed @kplug/sidecar) exists`,
  );
  process.exit(1);
}

rmSync(join(root, "src", "gen"), { recursive: true, force: true });
const buf = join(root, "node_modules", ".bin", "buf");
execFileSync(buf, ["generate", "--template", "buf.gen.yaml", "proto"], {
  cwd: root,
  stdio: "inherit",
});
