// The API reference of GET /docs: Swagger UI renders this server's /openapi.json.
// A file of its own, not an inline script, so that the page's CSP can stay
// `script-src 'self'` (docs/openapi.md).
"use strict";
window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#reference",
  // Swagger UI would otherwise send the document to validator.swagger.io for a badge.
  validatorUrl: null,
  // A reference, not a console: no "Try it out", so no request carries a key from here.
  supportedSubmitMethods: [],
  deepLinking: true,
  defaultModelsExpandDepth: 0,
});
