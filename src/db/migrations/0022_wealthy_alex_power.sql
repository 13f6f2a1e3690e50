CREATE TABLE `file_chunks` (
	`file_id` text NOT NULL,
	`idx` integer NOT NULL,
	`data` blob NOT NULL,
	PRIMARY KEY(`file_id`, `idx`)
);
--> statement-breakpoint
DROP TABLE `oidc_logins`;--> statement-breakpoint
DROP TABLE `rate_windows`;--> statement-breakpoint
ALTER TABLE `request_log` ADD `request_id` text;