"use strict";
// The page of `drover web` (docs/web.md).
