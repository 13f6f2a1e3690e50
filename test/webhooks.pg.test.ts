/** Job results delivered to webhook receivers, on PostgreSQL (a fresh database of the test cluster per server: test/helpers/postgres.ts). */
import { webhooksSuite } from "./suites/webhooks";

webhooksSuite("postgres");
