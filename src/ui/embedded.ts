/**
 * The dashboard's built files inside a compiled binary. From source this is empty (the handler
 * bundles ui/ in memory on first use); `build/build.ts` replaces this module at compile time with
 * one that embeds every built file (`uiModules` in src/ui/bundle.ts).
 */
export const embeddedUi: { files?: Record<string, { path: string; type: string }> } = {};
