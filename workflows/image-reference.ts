/**
 * Whether a container image reference is well formed, by the grammar every registry
 * client uses (github.com/distribution/reference, grammar.go), so a typo is named before
 * a VM pulls it:
 *
 *   reference  := name [ ":" tag ] [ "@" digest ]
 *   name       := [ domain "/" ] path-component [ "/" path-component ]*      (255 at most)
 *   domain     := host [ ":" port ]          host: a DNS name, or an IPv6 address in [ ]
 *   path-component := [a-z0-9]+ ( ( "." | "_" | "__" | "-"+ ) [a-z0-9]+ )*
 *   tag        := [\w][\w.-]{0,127}
 *   digest     := algorithm ":" hex          (sha256: 64 hex digits)
 *
 * Syntax only: whether the image exists is the registry's to say. Pure (no I/O).
 */

const ALPHANUMERIC = '[a-z0-9]+';
const SEPARATOR = '(?:[._]|__|-+)';
const PATH_COMPONENT = `${ALPHANUMERIC}(?:${SEPARATOR}${ALPHANUMERIC})*`;
const DOMAIN_COMPONENT = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const HOST = `(?:${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*|\\[[a-fA-F0-9:]+\\])`;
const DOMAIN = `${HOST}(?::[0-9]+)?`;
const NAME = `(?:${DOMAIN}/)?${PATH_COMPONENT}(?:/${PATH_COMPONENT})*`;
const TAG = '[\\w][\\w.-]{0,127}';
const DIGEST = '[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}';
const REFERENCE = new RegExp(`^(${NAME})(?::${TAG})?(?:@(${DIGEST}))?$`);

const MAX_NAME_LENGTH = 255;
const EXAMPLE = 'us-docker.pkg.dev/my-project/train/trainer:1.2 or python:3.12-slim';

/** Why `reference` is not a valid image reference, or undefined. */
export function imageReferenceProblem(reference: string): string | undefined {
  if (reference === '') return `an image reference cannot be empty; e.g. ${EXAMPLE}`;
  const match = REFERENCE.exec(reference);
  if (!match) {
    // The registry part may have capitals; the repository path may not (docker's own message).
    const path = reference.split('@')[0].replace(/:[\w][\w.-]{0,127}$/, '');
    const repository = path.includes('/') && /[.:]|^localhost\//.test(path.split('/')[0]) ? path.slice(path.indexOf('/') + 1) : path;
    if (/[A-Z]/.test(repository)) return `"${reference}": the repository name must be lowercase`;
    return `"${reference}" is not an image reference: expected [registry[:port]/]repository[:tag][@digest], e.g. ${EXAMPLE}`;
  }
  const [, name, digest] = match;
  if (name.length > MAX_NAME_LENGTH) return `the repository name is ${name.length} characters, more than the ${MAX_NAME_LENGTH} allowed`;
  if (digest?.startsWith('sha256:') && digest.length !== 'sha256:'.length + 64) return `"${reference}": a sha256 digest has 64 hex digits`;
  return undefined;
}
