// Runs the conformance plugin as a plugin process (see plugin.ts).
import { run } from "../src/index.js";
import { Conformance, info } from "./plugin.js";

run(new Conformance(), info());
