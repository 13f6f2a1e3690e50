CREATE TABLE `tenant_models` (
	`model_id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`pulled_at` text NOT NULL,
	`unused_since` text,
	FOREIGN KEY (`model_id`) REFERENCES `models`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
ALTER TABLE `projects` ADD `max_workloads` integer;--> statement-breakpoint
ALTER TABLE `projects` ADD `max_replicas` integer;--> statement-breakpoint
ALTER TABLE `projects` ADD `model_bytes` integer;