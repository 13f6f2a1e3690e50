/**
 * The built-in llama.cpp runtime's pack inside a compiled binary. From source this is empty (the
 * runner runs from the checkout); `build/build.ts` replaces this module at compile time with one
 * that embeds the pack (`path`, an embedded `/$bunfs/` file) or says why the target has none.
 */
export const embeddedPack: { path?: string; unavailable?: string } = {};
