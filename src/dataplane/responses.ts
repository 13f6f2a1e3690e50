import type { DataplaneDeps } from "./service";
import type { RouteBase } from "./target";
import { AppError } from "../errors";

/**
 * `POST /v1/responses` (OpenAI's Responses API) on both bases. STUB: answers 501 until built.
 */
export async function responsesRoute(deps: DataplaneDeps, request: Request, _base: RouteBase): Promise<Response> {
  deps.bodyBudget.release(request);
  throw new AppError(501, "not_implemented", "the Responses API is not built yet");
}
