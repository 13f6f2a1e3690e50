import type { DataplaneDeps } from "./service";
import type { RouteBase } from "./target";
import { AppError } from "../errors";

/** The Ollama API routes served under both bases (`…/api/<name>`), and their methods. */
export const OLLAMA_ROUTES = [
  { name: "chat", method: "POST" },
  { name: "generate", method: "POST" },
  { name: "embed", method: "POST" },
  { name: "embeddings", method: "POST" },
  { name: "show", method: "POST" },
  { name: "tags", method: "GET" },
  { name: "ps", method: "GET" },
  { name: "version", method: "GET" },
] as const;
export type OllamaRouteName = (typeof OLLAMA_ROUTES)[number]["name"];

/** One Ollama API route on either base. STUB: answers 501 until built. */
export async function ollamaRoute(deps: DataplaneDeps, request: Request, _base: RouteBase, name: OllamaRouteName): Promise<Response> {
  deps.bodyBudget.release(request);
  throw new AppError(501, "not_implemented", `the Ollama API (/api/${name}) is not built yet`);
}
