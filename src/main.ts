#!/usr/bin/env bun
/** Entry point of the `inferd` executable: parses the command line and runs it. */
import { runCli } from "./cli";

const code = await runCli(process.argv.slice(2), process.env);
if (code !== "running") process.exit(code);
