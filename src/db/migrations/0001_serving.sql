CREATE TABLE `assignments` (
	`id` text PRIMARY KEY NOT NULL,
	`workload_id` text NOT NULL,
	`worker_id` text NOT NULL,
	`concurrency` integer DEFAULT 20 NOT NULL,
	`gpus` integer DEFAULT 1 NOT NULL,
	`gpu_indices` text DEFAULT '[]' NOT NULL,
	`auto` integer DEFAULT false NOT NULL,
	`state` text DEFAULT 'pending' NOT NULL,
	`reason` text,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	FOREIGN KEY (`workload_id`) REFERENCES `workloads`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`worker_id`) REFERENCES `workers`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `assignments_workload` ON `assignments` (`workload_id`);--> statement-breakpoint
CREATE INDEX `assignments_worker` ON `assignments` (`worker_id`);--> statement-breakpoint
CREATE TABLE `workers` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`kind` text NOT NULL,
	`hostname` text,
	`credential_hash` text,
	`join_token_hash` text,
	`version` text,
	`cpu_cores` integer DEFAULT 0 NOT NULL,
	`ram_bytes` integer DEFAULT 0 NOT NULL,
	`gpus` text DEFAULT '[]' NOT NULL,
	`telemetry` text DEFAULT '{}' NOT NULL,
	`last_seen_at` text,
	`created_at` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `workload_usage` (
	`workload_id` text PRIMARY KEY NOT NULL,
	`requests` integer DEFAULT 0 NOT NULL,
	`errors` integer DEFAULT 0 NOT NULL,
	`input_tokens` integer DEFAULT 0 NOT NULL,
	`output_tokens` integer DEFAULT 0 NOT NULL,
	`last_used_at` text,
	FOREIGN KEY (`workload_id`) REFERENCES `workloads`(`id`) ON UPDATE no action ON DELETE cascade
);
