ALTER TABLE "audit_log" ADD COLUMN "request_id" text;--> statement-breakpoint
ALTER TABLE "jobs" ADD COLUMN "request_id" text;--> statement-breakpoint
ALTER TABLE "workloads" ADD COLUMN "aliases" text DEFAULT '[]' NOT NULL;--> statement-breakpoint
ALTER TABLE "workloads" ADD COLUMN "fallbacks" text DEFAULT '[]' NOT NULL;