CREATE TABLE `batches` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`workload_id` text,
	`workloads` text NOT NULL,
	`key_id` text,
	`endpoint` text NOT NULL,
	`input_file_id` text NOT NULL,
	`completion_window` text NOT NULL,
	`status` text NOT NULL,
	`metadata` text,
	`errors` text,
	`output_file_id` text,
	`error_file_id` text,
	`total` integer DEFAULT 0 NOT NULL,
	`completed` integer DEFAULT 0 NOT NULL,
	`failed` integer DEFAULT 0 NOT NULL,
	`created_at` text NOT NULL,
	`in_progress_at` text,
	`expires_at` text NOT NULL,
	`finalizing_at` text,
	`completed_at` text,
	`failed_at` text,
	`expired_at` text,
	`cancelling_at` text,
	`cancelled_at` text,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`workload_id`) REFERENCES `workloads`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `batches_project` ON `batches` (`project_id`,`created_at`);--> statement-breakpoint
CREATE INDEX `batches_status` ON `batches` (`status`);--> statement-breakpoint
CREATE TABLE `files` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`batch_id` text,
	`key_id` text,
	`filename` text NOT NULL,
	`purpose` text NOT NULL,
	`bytes` integer NOT NULL,
	`content` blob NOT NULL,
	`created_at` text NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `files_project` ON `files` (`project_id`,`created_at`);--> statement-breakpoint
ALTER TABLE `jobs` ADD `batch_id` text;--> statement-breakpoint
ALTER TABLE `jobs` ADD `custom_id` text;--> statement-breakpoint
CREATE INDEX `jobs_batch` ON `jobs` (`batch_id`);