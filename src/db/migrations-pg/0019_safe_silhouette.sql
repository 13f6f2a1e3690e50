CREATE TABLE "adapters" (
	"id" text PRIMARY KEY NOT NULL,
	"workload_id" text NOT NULL,
	"project_id" text NOT NULL,
	"name" text NOT NULL,
	"source" text NOT NULL,
	"model_id" text,
	"state" text NOT NULL,
	"reason" text,
	"format" text,
	"base_model" text,
	"rank" integer,
	"bytes" bigint DEFAULT 0 NOT NULL,
	"created_at" text NOT NULL,
	"created_by" text
);
--> statement-breakpoint
ALTER TABLE "adapters" ADD CONSTRAINT "adapters_workload_id_workloads_id_fk" FOREIGN KEY ("workload_id") REFERENCES "public"."workloads"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "adapters_project_name" ON "adapters" USING btree ("project_id","name");--> statement-breakpoint
CREATE INDEX "adapters_workload" ON "adapters" USING btree ("workload_id");