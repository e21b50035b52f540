#!/usr/bin/env node
// What pnpm links as `oc`. It must exist when pnpm links bins, which is before the install's build makes
// dist/, so it is a committed file that loads the bundle rather than the bundle itself.
import '../dist/main.js';
