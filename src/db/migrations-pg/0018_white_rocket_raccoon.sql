ALTER TABLE "request_log" ADD COLUMN "error_message" text;--> statement-breakpoint
ALTER TABLE "request_log" ADD COLUMN "source" text;--> statement-breakpoint
ALTER TABLE "request_log" ADD COLUMN "fell_back_from" text;--> statement-breakpoint
CREATE INDEX "request_log_project" ON "request_log" USING btree ("project_id","at");--> statement-breakpoint
CREATE INDEX "request_log_key" ON "request_log" USING btree ("key_id","at");