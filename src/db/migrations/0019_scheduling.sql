ALTER TABLE `api_keys` ADD `priority` text;--> statement-breakpoint
ALTER TABLE `api_keys` ADD `weight` integer;--> statement-breakpoint
ALTER TABLE `workloads` ADD `routing` text;