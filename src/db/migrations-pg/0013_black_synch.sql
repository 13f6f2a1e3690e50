CREATE TABLE "file_chunks" (
	"file_id" text NOT NULL,
	"idx" integer NOT NULL,
	"data" "bytea" NOT NULL,
	CONSTRAINT "file_chunks_file_id_idx_pk" PRIMARY KEY("file_id","idx")
);
--> statement-breakpoint
DROP TABLE "oidc_logins" CASCADE;--> statement-breakpoint
DROP TABLE "rate_windows" CASCADE;--> statement-breakpoint
ALTER TABLE "request_log" ADD COLUMN "request_id" text;