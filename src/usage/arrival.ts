/** When each data-plane request arrived (`performance.now()`), noted by the app before anything else runs. */
const arrivals = new WeakMap<Request, number>();

/** Notes that a request arrived now (returned): its meter's clock starts here, not when it reaches a runtime. */
export function noteArrival(request: Request): number {
  const now = performance.now();
  arrivals.set(request, now);
  return now;
}

/** When a request arrived, or now when it was not noted (e.g. the dashboard's playground). */
export function arrivalOf(request: Request): number {
  return arrivals.get(request) ?? performance.now();
}
