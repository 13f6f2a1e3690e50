/**
 * Values ready now or later. The request path answers from memory when it can (a memoised key, a
 * count already read) and only then falls back to the store; these keep the first case free of
 * promises, so a request that needs no store read does not pay for one.
 */

/** A value, or a promise of it. */
export type Maybe<T> = T | Promise<T>;

/**
 * Applies `f` now when `x` is a value, or once it resolves.
 * @example andThen(lookup(k), (v) => v.name) // → the name now, or a promise of it
 */
export function andThen<T, U>(x: Maybe<T>, f: (v: T) => Maybe<U>): Maybe<U> {
  return x instanceof Promise ? x.then(f) : f(x);
}
