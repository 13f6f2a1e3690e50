/** Words for messages people read: counts with their noun in the right number. */

/**
 * `n` and its noun, singular for one and plural otherwise (`many`, else the noun with an s).
 * @example plural(1, "request") // → "1 request"; plural(3, "replica") // → "3 replicas"
 */
export const plural = (n: number, what: string, many = `${what}s`): string => `${n} ${n === 1 ? what : many}`;
