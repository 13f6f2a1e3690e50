ALTER TABLE `workloads` ADD `aliases` text DEFAULT '[]' NOT NULL;--> statement-breakpoint
ALTER TABLE `workloads` ADD `fallbacks` text DEFAULT '[]' NOT NULL;