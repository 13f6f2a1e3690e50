CREATE TABLE `audit_log` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`at` text NOT NULL,
	`actor_type` text NOT NULL,
	`actor_id` text,
	`actor_label` text NOT NULL,
	`action` text NOT NULL,
	`target_type` text NOT NULL,
	`target_id` text,
	`target_label` text,
	`diff` text DEFAULT '{}' NOT NULL
);
--> statement-breakpoint
CREATE INDEX `audit_at` ON `audit_log` (`at`);--> statement-breakpoint
CREATE INDEX `audit_actor` ON `audit_log` (`actor_id`,`at`);--> statement-breakpoint
CREATE INDEX `audit_target` ON `audit_log` (`target_id`,`at`);--> statement-breakpoint
CREATE TABLE `usage_daily` (
	`day` text NOT NULL,
	`key_id` text NOT NULL,
	`workload_id` text NOT NULL,
	`project_id` text NOT NULL,
	`requests` integer DEFAULT 0 NOT NULL,
	`errors` integer DEFAULT 0 NOT NULL,
	`input_tokens` integer DEFAULT 0 NOT NULL,
	`output_tokens` integer DEFAULT 0 NOT NULL,
	PRIMARY KEY(`day`, `key_id`, `workload_id`)
);
--> statement-breakpoint
CREATE INDEX `usage_daily_project` ON `usage_daily` (`project_id`,`day`);--> statement-breakpoint
ALTER TABLE `api_keys` ADD `rpm` integer;--> statement-breakpoint
ALTER TABLE `api_keys` ADD `tpm` integer;--> statement-breakpoint
ALTER TABLE `api_keys` ADD `max_concurrent` integer;--> statement-breakpoint
ALTER TABLE `api_keys` ADD `tokens_per_day` integer;--> statement-breakpoint
ALTER TABLE `api_keys` ADD `tokens_per_month` integer;--> statement-breakpoint
ALTER TABLE `projects` ADD `tokens_per_day` integer;--> statement-breakpoint
ALTER TABLE `projects` ADD `tokens_per_month` integer;