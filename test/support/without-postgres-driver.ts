/**
 * Loaded with `node --import` to run a process as if the optional `postgres` driver were not
 * installed: resolving it fails exactly as it does when the package is absent.
 */
import { registerHooks } from 'node:module';

registerHooks({
  resolve(specifier, context, nextResolve) {
    if (specifier === 'postgres') {
      const error = new Error(`Cannot find package 'postgres' imported from ${context.parentURL}`) as Error & { code: string };
      error.code = 'ERR_MODULE_NOT_FOUND';
      throw error;
    }
    return nextResolve(specifier, context);
  },
});
