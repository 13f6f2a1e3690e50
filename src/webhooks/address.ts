/**
 * Webhook receivers' addresses: the shared address rules (`agent/net/address.ts`) with the HTTP
 * shape of a refusal, 400 `invalid_webhook_url`; a receiver refused only for being on a private or
 * loopback address is told which setting allows it.
 */
import { AppError } from "../errors";
import { SETTINGS } from "../config";
import { AddressRefused, checkUrl, resolveAllowed, type AddressPolicy, type Resolved } from "../../agent/net/address";

export {
  isAllowedAddress,
  makeResolver,
  type AddressPolicy,
  type Resolve,
  type Resolved,
} from "../../agent/net/address";

/** A webhook URL or host that is refused; 400 `invalid_webhook_url` with the reason. */
export const refused = (message: string) => new AppError(400, "invalid_webhook_url", message);

/** Runs `fn`, turning an address refusal into 400 `invalid_webhook_url`. */
function asRefusal<T>(fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    throw e instanceof AddressRefused ? refused(e.message) : e;
  }
}

/** Checks a webhook URL's shape: https only, a host, no credentials. Returns the parsed URL. */
export function checkUrlShape(raw: string): URL {
  return asRefusal(() => checkUrl(raw, { what: "webhook URLs" }));
}

/** How the operator allows private receivers, for messages. */
const ALLOW_PRIVATE = `${SETTINGS.allowPrivateWebhooks.flag} (${SETTINGS.allowPrivateWebhooks.env}, or Private webhooks on the dashboard's Settings page)`;

/**
 * Resolves the URL's host and checks every address; returns the one to connect to. Called at save
 * and again at each delivery, whose connection then goes to exactly this address. A refusal that
 * allowing private addresses would lift names the setting.
 */
export async function resolveChecked(url: URL, policy: AddressPolicy): Promise<Resolved> {
  try {
    return await resolveAllowed(url, policy);
  } catch (e) {
    if (!(e instanceof AddressRefused)) throw e;
    const privateOnly =
      !policy.allowPrivate &&
      (await resolveAllowed(url, { resolve: policy.resolve, allowPrivate: true }).then(
        () => true,
        () => false,
      ));
    throw refused(
      privateOnly
        ? `${e.message}; receivers on LAN or loopback addresses are allowed only with ${ALLOW_PRIVATE}`
        : e.message,
    );
  }
}
