#!/usr/bin/env bun
/** Entry point of the `inferd` executable: parses the command line and runs it. */
import { runCli } from "./cli";
import { raiseFetchLimit } from "./fetch-limit";

const code = await runCli(process.argv.slice(2), process.env, undefined, undefined, () => raiseFetchLimit());
if (code !== "running") process.exit(code);
