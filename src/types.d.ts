/** SQL migration files are imported as text (embedded in the binary). */
declare module "*.sql" {
  const text: string;
  export default text;
}
