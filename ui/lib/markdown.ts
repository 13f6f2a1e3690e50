/** A model's answer as safe HTML: Markdown by marked, then DOMPurify (no scripts, handlers, images or styles). */
import { marked } from "marked";
import DOMPurify from "dompurify";

/**
 * Tags an answer may not produce: scripts and handlers are gone anyway; images (a remote image
 * leaks the conversation in its URL), forms and frames are dropped too.
 */
const FORBID_TAGS = ["img", "picture", "source", "video", "audio", "iframe", "object", "embed", "form", "input", "button", "textarea", "select", "style", "link", "meta", "base", "svg", "math"];

let hooked = false;

/** Links in answers open in a new tab and pass no referrer. */
function hookLinks(): void {
  if (hooked) return;
  hooked = true;
  DOMPurify.addHook("afterSanitizeAttributes", (node) => {
    if (node.tagName === "A") {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer nofollow");
    }
  });
}

/**
 * The HTML of Markdown `text`, sanitised; raw HTML in the text is escaped or removed, never run.
 * @example markdownHtml("**hi** <script>x()</script>") // → "<p><strong>hi</strong> </p>\n"
 */
export function markdownHtml(text: string): string {
  hookLinks();
  const html = marked.parse(text, { async: false, gfm: true, breaks: true });
  return DOMPurify.sanitize(html, { FORBID_TAGS, FORBID_ATTR: ["style"], ALLOW_DATA_ATTR: false });
}
