CREATE TABLE `series_buckets` (
	`kind` text NOT NULL,
	`subject` text NOT NULL,
	`t` integer NOT NULL,
	`host_id` text NOT NULL,
	`data` text NOT NULL,
	PRIMARY KEY(`kind`, `subject`, `t`, `host_id`)
);
--> statement-breakpoint
CREATE INDEX `series_buckets_t` ON `series_buckets` (`t`);--> statement-breakpoint
CREATE TABLE `settings` (
	`key` text PRIMARY KEY NOT NULL,
	`value` text NOT NULL,
	`updated_at` text NOT NULL,
	`updated_by` text
);
