/** The engines as the dashboard shows them, generated from their descriptors when the dashboard is bundled (src/ui/bundle.ts). */
declare module "inferd:engines" {
  export const ENGINE_FACES: import("../../agent/engines").EngineFace[];
}
