ALTER TABLE `assignments` ADD `group_id` text;--> statement-breakpoint
ALTER TABLE `assignments` ADD `node_rank` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `assignments` ADD `endpoint` text;--> statement-breakpoint
ALTER TABLE `workers` ADD `cluster_address` text;--> statement-breakpoint
ALTER TABLE `workloads` ADD `nodes` integer DEFAULT 1 NOT NULL;