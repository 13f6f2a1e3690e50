/** Job results delivered to webhook receivers, on the embedded SQLite store (webhooks.pg.test.ts runs the same suite on PostgreSQL). */
import { webhooksSuite } from "./suites/webhooks";

webhooksSuite("sqlite");
