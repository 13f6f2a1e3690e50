CREATE TABLE `adapters` (
	`id` text PRIMARY KEY NOT NULL,
	`workload_id` text NOT NULL,
	`project_id` text NOT NULL,
	`name` text NOT NULL,
	`source` text NOT NULL,
	`model_id` text,
	`state` text NOT NULL,
	`reason` text,
	`format` text,
	`base_model` text,
	`rank` integer,
	`bytes` integer DEFAULT 0 NOT NULL,
	`created_at` text NOT NULL,
	`created_by` text,
	FOREIGN KEY (`workload_id`) REFERENCES `workloads`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `adapters_project_name` ON `adapters` (`project_id`,`name`);--> statement-breakpoint
CREATE INDEX `adapters_workload` ON `adapters` (`workload_id`);