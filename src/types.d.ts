/** SQL migration files are imported as text (embedded in the binary). */
declare module "*.sql" {
  const text: string;
  export default text;
}

/** Swagger UI's files, imported `with { type: "file" }`: their path (embedded in a compiled binary). */
declare module "swagger-ui-dist/swagger-ui-bundle.js" {
  const path: string;
  export default path;
}
declare module "swagger-ui-dist/swagger-ui.css" {
  const path: string;
  export default path;
}
