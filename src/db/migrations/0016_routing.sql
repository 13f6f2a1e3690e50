ALTER TABLE `audit_log` ADD `request_id` text;--> statement-breakpoint
ALTER TABLE `jobs` ADD `request_id` text;--> statement-breakpoint
ALTER TABLE `workloads` ADD `aliases` text DEFAULT '[]' NOT NULL;--> statement-breakpoint
ALTER TABLE `workloads` ADD `fallbacks` text DEFAULT '[]' NOT NULL;