import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, lstatSync, readFileSync } from "node:fs";
import { mkdir, symlink, unlink, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { afterEach, beforeEach, describe, it } from "node:test";

import { removeDir, tempSocketDir } from "./helpers.js";
import {
  claimSocket,
  InvalidNameError,
  isLive,
  NotASocketError,
  type Plugin,
  PluginServer,
  Response,
  SocketFile,
  SocketInUseError,
  StartupError,
} from "./sdk.js";

const noop: Plugin = { reconcile: () => Response.ok() };
const INFO = {
  name: "demo",
  version: "1",
  offers: [{ base: { group: "x.org", kind: "Thing" }, implementation: "Impl" }],
};
const quiet = { debug() {}, info() {}, warn() {}, error() {} };

function listen(path: string): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(path, () => resolve(server));
  });
}

function close(server: Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}

/** A socket file nobody listens on: what a SIGKILLed plugin leaves behind. */
async function makeStale(path: string): Promise<void> {
  const script = `require("net").createServer().listen(${JSON.stringify(path)}, () => process.kill(process.pid, "SIGKILL"))`;
  await new Promise<void>((resolve) => spawn(process.execPath, ["-e", script]).once("exit", () => resolve()));
  assert.ok(lstatSync(path).isSocket(), "the stale socket file is there");
}

let dir: string;
let sockPath: string;
beforeEach(async () => {
  dir = await tempSocketDir();
  sockPath = join(dir, "plugins", "demo", "plugin.sock");
});
afterEach(async () => {
  await removeDir(dir);
});

describe("claimSocket", () => {
  it("creates the plugins dir for a free path", async () => {
    await claimSocket(sockPath, "demo");
    assert.ok(lstatSync(join(dir, "plugins")).isDirectory());
    assert.equal(existsSync(sockPath), false);
  });

  it("removes a stale socket", async () => {
    await mkdir(join(dir, "plugins", "demo"), { recursive: true });
    await makeStale(sockPath);
    assert.equal(await isLive(sockPath), false);
    await claimSocket(sockPath, "demo");
    assert.equal(existsSync(sockPath), false);
  });

  it("refuses a live socket and leaves it alone", async () => {
    await mkdir(join(dir, "plugins", "demo"), { recursive: true });
    const live = await listen(sockPath);
    try {
      await assert.rejects(claimSocket(sockPath, "demo"), (error: unknown) => {
        assert.ok(error instanceof SocketInUseError);
        assert.match(error.message, new RegExp(`^plugin demo: ${sockPath} is served by another live process`));
        return true;
      });
      assert.equal(await isLive(sockPath), true, "the live socket survives");
    } finally {
      await close(live);
    }
  });

  for (const kind of ["file", "directory", "symlink"] as const) {
    it(`refuses a ${kind} and keeps it`, async () => {
      await mkdir(join(dir, "plugins", "demo"), { recursive: true });
      if (kind === "file") {
        await writeFile(sockPath, "precious");
      } else if (kind === "directory") {
        await mkdir(sockPath);
      } else {
        await symlink("/etc/hostname", sockPath);
      }
      await assert.rejects(claimSocket(sockPath, "demo"), (error: unknown) => {
        assert.ok(error instanceof NotASocketError);
        assert.ok(error.message.startsWith(`plugin demo: ${sockPath} exists and is not a socket`));
        return true;
      });
      assert.ok(lstatSync(sockPath));
      if (kind === "file") {
        assert.equal(readFileSync(sockPath, "utf8"), "precious");
      }
    });
  }

  it("refuses a path too long for a Unix socket", async () => {
    await assert.rejects(claimSocket(join(dir, "d".repeat(120), "x.sock"), "demo"), {
      name: "StartupError",
      message: /longer than 107 bytes.*KPLUG_SOCKET_DIR/,
    });
  });
});

describe("isLive", () => {
  it("tells live, stale and missing sockets apart", async () => {
    await mkdir(join(dir, "plugins", "demo"), { recursive: true });
    assert.equal(await isLive(sockPath), false);
    const live = await listen(sockPath);
    assert.equal(await isLive(sockPath), true);
    await close(live);
    await makeStale(sockPath);
    assert.equal(await isLive(sockPath), false);
  });
});

describe("SocketFile", () => {
  it("removes only our own, stale socket", async () => {
    await mkdir(join(dir, "plugins", "demo"), { recursive: true });
    await makeStale(sockPath);
    const ours = await SocketFile.boundAt(sockPath);
    await unlink(sockPath);
    const successor = await listen(sockPath);
    try {
      assert.equal(await ours.remove(), false, "a live successor's socket is not ours");
      assert.ok(existsSync(sockPath));
    } finally {
      await close(successor); // Node.js removes the file when it closes
    }
    assert.equal(await ours.remove(), false, "nothing left to remove");

    await makeStale(sockPath);
    const stale = await SocketFile.boundAt(sockPath);
    assert.equal(await stale.remove(), true);
    assert.equal(existsSync(sockPath), false);
  });
});

describe("plugin names", () => {
  for (const name of ["", "Demo", "-demo", "demo-", "de_mo", "de.mo", "a".repeat(64), "dé", "demo\n", "a/b"]) {
    it(`refuses ${JSON.stringify(name)}`, () => {
      assert.throws(() => new PluginServer(noop, { ...INFO, name }, { socketDir: dir, logger: quiet }), (error: unknown) => {
        assert.ok(error instanceof InvalidNameError);
        assert.ok(error instanceof StartupError);
        assert.match(error.message, /must be a DNS label/);
        return true;
      });
    });
  }

  for (const name of ["a", "0", "postgresql", "my-plugin-2", "a".repeat(63)]) {
    it(`accepts ${JSON.stringify(name)}`, () => {
      const server = new PluginServer(noop, { ...INFO, name }, { socketDir: dir, logger: quiet });
      assert.equal(server.socketPath, join(dir, "plugins", name, "plugin.sock"));
    });
  }
});

describe("PluginServer and the socket", () => {
  it("does not steal the live socket of another instance", async () => {
    const first = new PluginServer(noop, INFO, { socketDir: dir, heartbeatIntervalSeconds: 60, logger: quiet });
    await first.start();
    try {
      const second = new PluginServer(noop, INFO, { socketDir: dir, heartbeatIntervalSeconds: 60, logger: quiet });
      await assert.rejects(second.start(), SocketInUseError);
      assert.equal(await isLive(first.socketPath), true);
    } finally {
      await first.stop(0);
    }
    assert.equal(existsSync(first.socketPath), false);
  });

  it("starts over a stale socket", async () => {
    await mkdir(join(dir, "plugins", "demo"), { recursive: true });
    await makeStale(sockPath);
    const server = new PluginServer(noop, INFO, { socketDir: dir, heartbeatIntervalSeconds: 60, logger: quiet });
    await server.start();
    try {
      assert.equal(await isLive(sockPath), true);
    } finally {
      await server.stop(0);
    }
  });

  it("refuses to start over a file that is not a socket", async () => {
    await mkdir(join(dir, "plugins", "demo"), { recursive: true });
    await writeFile(sockPath, "precious");
    const server = new PluginServer(noop, INFO, { socketDir: dir, heartbeatIntervalSeconds: 60, logger: quiet });
    await assert.rejects(server.start(), NotASocketError);
    assert.equal(readFileSync(sockPath, "utf8"), "precious");
  });
});
