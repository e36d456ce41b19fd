// ESLint with typescript-eslint's strict, type-aware rules, over the SDK,
// its tests, the example, the conformance plugin and the bench servers
// (`npm run lint`).
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  {
    // Generated and built output.
    ignores: ["node_modules/", "dist/", "build/", "proto/", "src/gen/"],
  },
  js.configs.recommended,
  {
    files: ["**/*.ts"],
    extends: [tseslint.configs.strictTypeChecked, tseslint.configs.stylisticTypeChecked],
    languageOptions: {
      parserOptions: {
        projectService: true,
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      // Numbers and booleans in messages are fine.
      "@typescript-eslint/restrict-template-expressions": ["error", { allowNumber: true, allowBoolean: true }],
      // Builders return `this` and callbacks are often intentionally empty.
      "@typescript-eslint/no-empty-function": "off",
      // Handlers are async by contract, whether or not they await.
      "@typescript-eslint/require-await": "off",
      // An empty string means "not set" in protobuf messages and messages.
      "@typescript-eslint/prefer-nullish-coalescing": ["error", { ignorePrimitives: { string: true } }],
      "@typescript-eslint/no-confusing-void-expression": ["error", { ignoreArrowShorthand: true }],
      // Unused parameters with a leading underscore are part of an interface.
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_" }],
    },
  },
  {
    files: ["test/**/*.ts"],
    rules: {
      // Tests assert shapes they just checked.
      "@typescript-eslint/no-non-null-assertion": "off",
      // node:test's describe() and it() return promises the runner awaits.
      "@typescript-eslint/no-floating-promises": [
        "error",
        {
          allowForKnownSafeCalls: [
            { from: "package", package: "node:test", name: ["describe", "it", "test", "suite"] },
          ],
        },
      ],
    },
  },
  {
    files: ["**/*.js", "**/*.mjs"],
    languageOptions: {
      globals: { console: "readonly", process: "readonly" },
    },
  },
);
