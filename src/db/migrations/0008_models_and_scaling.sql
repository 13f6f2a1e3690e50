CREATE TABLE `models` (
	`id` text PRIMARY KEY NOT NULL,
	`source` text NOT NULL,
	`source_key` text NOT NULL,
	`kind` text NOT NULL,
	`repo` text,
	`revision` text,
	`state` text NOT NULL,
	`reason` text,
	`entry` text,
	`dir` text,
	`files` text DEFAULT '[]' NOT NULL,
	`bytes_total` integer DEFAULT 0 NOT NULL,
	`bytes_done` integer DEFAULT 0 NOT NULL,
	`metadata` text,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	`last_used_at` text
);
--> statement-breakpoint
CREATE UNIQUE INDEX `models_source_key` ON `models` (`source_key`);--> statement-breakpoint
ALTER TABLE `assignments` ADD `desired` text DEFAULT 'run' NOT NULL;--> statement-breakpoint
ALTER TABLE `assignments` ADD `concurrency_set` integer DEFAULT true NOT NULL;--> statement-breakpoint
ALTER TABLE `assignments` ADD `generation` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `workloads` ADD `execution_params` text DEFAULT '{}' NOT NULL;--> statement-breakpoint
ALTER TABLE `workloads` ADD `paused` integer DEFAULT false NOT NULL;--> statement-breakpoint
UPDATE `assignments` SET `concurrency_set` = 0 WHERE `auto` = 1;
