ALTER TABLE "assignments" ADD COLUMN "group_id" text;--> statement-breakpoint
ALTER TABLE "assignments" ADD COLUMN "node_rank" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "assignments" ADD COLUMN "endpoint" text;--> statement-breakpoint
ALTER TABLE "workers" ADD COLUMN "cluster_address" text;--> statement-breakpoint
ALTER TABLE "workloads" ADD COLUMN "nodes" bigint DEFAULT 1 NOT NULL;