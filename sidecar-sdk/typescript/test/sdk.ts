// What the tests import from the SDK: its public API, and a few internals.
export * from "../src/index.js";
export { secondsToDuration as secondsToDurationForTests } from "../src/response.js";
export { channelOptions } from "../src/heartbeat.js";
export { registryWaitingMessage, socketDirMissingMessage } from "../src/protocol.js";
export { pluginHandlers } from "../src/service.js";
