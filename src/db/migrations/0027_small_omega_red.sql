ALTER TABLE `request_log` ADD `error_message` text;--> statement-breakpoint
ALTER TABLE `request_log` ADD `source` text;--> statement-breakpoint
ALTER TABLE `request_log` ADD `fell_back_from` text;--> statement-breakpoint
CREATE INDEX `request_log_project` ON `request_log` (`project_id`,`at`);--> statement-breakpoint
CREATE INDEX `request_log_key` ON `request_log` (`key_id`,`at`);