ALTER TABLE "api_keys" ADD COLUMN "priority" text;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "weight" bigint;--> statement-breakpoint
ALTER TABLE "workloads" ADD COLUMN "routing" text;