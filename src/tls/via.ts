/** Requests that arrived on the HTTPS listener (agents must use it; sign-in cookies are marked secure on it). */
export const viaTls = new WeakSet<Request>();
