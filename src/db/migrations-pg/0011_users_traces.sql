CREATE TABLE "oidc_logins" (
	"state_hash" text PRIMARY KEY NOT NULL,
	"nonce" text NOT NULL,
	"code_verifier" text NOT NULL,
	"return_to" text DEFAULT '/' NOT NULL,
	"expires_at" text NOT NULL
);
--> statement-breakpoint
CREATE TABLE "project_members" (
	"user_id" text NOT NULL,
	"project_id" text NOT NULL,
	"created_at" text NOT NULL,
	CONSTRAINT "project_members_user_id_project_id_pk" PRIMARY KEY("user_id","project_id")
);
--> statement-breakpoint
CREATE TABLE "request_bodies" (
	"request_id" text PRIMARY KEY NOT NULL,
	"workload_id" text NOT NULL,
	"at" text NOT NULL,
	"request_type" text,
	"request" "bytea",
	"response_type" text,
	"response" "bytea",
	"truncated" integer DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE TABLE "request_log" (
	"id" text PRIMARY KEY NOT NULL,
	"at" text NOT NULL,
	"workload_id" text NOT NULL,
	"project_id" text NOT NULL,
	"key_id" text,
	"kind" text NOT NULL,
	"route" text NOT NULL,
	"model" text,
	"status" bigint NOT NULL,
	"error_code" text,
	"tokens_in" bigint,
	"tokens_out" bigint,
	"queue_ms" bigint,
	"ttft_ms" bigint,
	"total_ms" bigint NOT NULL,
	"assignment_id" text,
	"worker_id" text,
	"host_id" text,
	"trace_id" text,
	"spans" text DEFAULT '[]' NOT NULL,
	"captured" integer DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE TABLE "users" (
	"id" text PRIMARY KEY NOT NULL,
	"email" text NOT NULL,
	"name" text DEFAULT '' NOT NULL,
	"role" text NOT NULL,
	"password_hash" text,
	"oidc_issuer" text,
	"oidc_subject" text,
	"created_at" text NOT NULL,
	"updated_at" text NOT NULL,
	"last_sign_in_at" text
);
--> statement-breakpoint
ALTER TABLE "audit_log" ADD COLUMN "project_id" text;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "user_id" text;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "method" text;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "user_agent" text;--> statement-breakpoint
ALTER TABLE "workloads" ADD COLUMN "capture_until" text;--> statement-breakpoint
ALTER TABLE "project_members" ADD CONSTRAINT "project_members_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "project_members" ADD CONSTRAINT "project_members_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "project_members_project" ON "project_members" USING btree ("project_id");--> statement-breakpoint
CREATE INDEX "request_log_workload" ON "request_log" USING btree ("workload_id","at");--> statement-breakpoint
CREATE INDEX "request_log_at" ON "request_log" USING btree ("at");--> statement-breakpoint
CREATE UNIQUE INDEX "users_email" ON "users" USING btree ("email");--> statement-breakpoint
CREATE UNIQUE INDEX "users_oidc" ON "users" USING btree ("oidc_issuer","oidc_subject");--> statement-breakpoint
ALTER TABLE "sessions" ADD CONSTRAINT "sessions_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "audit_project" ON "audit_log" USING btree ("project_id","at");