CREATE TABLE "series_buckets" (
	"kind" text NOT NULL,
	"subject" text NOT NULL,
	"t" bigint NOT NULL,
	"host_id" text NOT NULL,
	"data" text NOT NULL,
	CONSTRAINT "series_buckets_kind_subject_t_host_id_pk" PRIMARY KEY("kind","subject","t","host_id")
);
--> statement-breakpoint
CREATE TABLE "settings" (
	"key" text PRIMARY KEY NOT NULL,
	"value" text NOT NULL,
	"updated_at" text NOT NULL,
	"updated_by" text
);
--> statement-breakpoint
CREATE INDEX "series_buckets_t" ON "series_buckets" USING btree ("t");