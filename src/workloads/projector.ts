/**
 * The projector of a vision model for llama.cpp (`--mmproj <file>`): GGUF repos and the tools that
 * download them (LM Studio, llama.cpp's cache, inferd's store) keep it as an `mmproj-….gguf` file
 * beside the model, which llama.cpp never loads as the model itself (agent/models/select.ts).
 */
import { readdirSync } from "node:fs";
import { basename, dirname, isAbsolute, join } from "node:path";
import type { Db } from "../db";
import { listModelRows } from "../models/service";
import { bestProjector } from "../../agent/models/select";

/** A file name that is a projector: a GGUF with `mmproj` in its name. */
const PROJECTOR = /mmproj.*\.gguf$/i;

/**
 * The projector beside a GGUF model file (the quantisation closest to the model's when there are several), or null.
 * @example projectorBeside("/m/Tiny-Q4_K_M.gguf") // → "/m/mmproj-Tiny-F16.gguf"
 */
export function projectorBeside(model: string): string | null {
  if (!isAbsolute(model) || PROJECTOR.test(basename(model))) return null;
  let names: string[];
  try {
    names = readdirSync(dirname(model));
  } catch {
    return null;
  }
  // The one llama.cpp's `-hf` would take: the quantisation closest to the model's (agent/models/select.ts).
  const found = bestProjector(
    names
      .filter((n) => PROJECTOR.test(n))
      .sort()
      .map((path) => ({ path })),
    basename(model),
  );
  return found ? join(dirname(model), found.path) : null;
}

/** A model reference without `hf:`, in lower case: `hf:o/r:q4_k_m` and `o/r:Q4_K_M` compare equal. */
const plain = (ref: string) => ref.trim().replace(/^hf:/, "").toLowerCase();

/**
 * The projector for a llama.cpp model reference as the workload form names it: for a path, the one
 * beside it; for a model of inferd's store (by source or entry), the one beside its entry. Null
 * when none is known (a hub model not pulled yet, or one without a projector).
 */
export async function projectorOf(db: Db, ref: string): Promise<string | null> {
  if (isAbsolute(ref)) return projectorBeside(ref);
  const row = (await listModelRows(db)).find(
    (r) => r.state === "ready" && r.entry && (plain(r.source) === plain(ref) || r.entry === ref),
  );
  return row?.entry ? projectorBeside(row.entry) : null;
}
