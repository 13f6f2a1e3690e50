CREATE TABLE `workload_secrets` (
	`workload_id` text PRIMARY KEY NOT NULL,
	`sealed` text NOT NULL,
	`hint` text NOT NULL,
	`created_at` text NOT NULL,
	FOREIGN KEY (`workload_id`) REFERENCES `workloads`(`id`) ON UPDATE no action ON DELETE cascade
);
