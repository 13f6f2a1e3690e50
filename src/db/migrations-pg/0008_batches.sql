CREATE TABLE "batches" (
	"id" text PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"workload_id" text,
	"workloads" text NOT NULL,
	"key_id" text,
	"endpoint" text NOT NULL,
	"input_file_id" text NOT NULL,
	"completion_window" text NOT NULL,
	"status" text NOT NULL,
	"metadata" text,
	"errors" text,
	"output_file_id" text,
	"error_file_id" text,
	"total" bigint DEFAULT 0 NOT NULL,
	"completed" bigint DEFAULT 0 NOT NULL,
	"failed" bigint DEFAULT 0 NOT NULL,
	"created_at" text NOT NULL,
	"in_progress_at" text,
	"expires_at" text NOT NULL,
	"finalizing_at" text,
	"completed_at" text,
	"failed_at" text,
	"expired_at" text,
	"cancelling_at" text,
	"cancelled_at" text
);
--> statement-breakpoint
CREATE TABLE "files" (
	"id" text PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"batch_id" text,
	"key_id" text,
	"filename" text NOT NULL,
	"purpose" text NOT NULL,
	"bytes" bigint NOT NULL,
	"content" "bytea" NOT NULL,
	"created_at" text NOT NULL
);
--> statement-breakpoint
ALTER TABLE "jobs" ADD COLUMN "batch_id" text;--> statement-breakpoint
ALTER TABLE "jobs" ADD COLUMN "custom_id" text;--> statement-breakpoint
ALTER TABLE "batches" ADD CONSTRAINT "batches_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "batches" ADD CONSTRAINT "batches_workload_id_workloads_id_fk" FOREIGN KEY ("workload_id") REFERENCES "public"."workloads"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "files" ADD CONSTRAINT "files_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "batches_project" ON "batches" USING btree ("project_id","created_at");--> statement-breakpoint
CREATE INDEX "batches_status" ON "batches" USING btree ("status");--> statement-breakpoint
CREATE INDEX "files_project" ON "files" USING btree ("project_id","created_at");--> statement-breakpoint
CREATE INDEX "jobs_batch" ON "jobs" USING btree ("batch_id");