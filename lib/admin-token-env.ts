/**
 * The environment variable that carries the admin token, for servers and client commands alike;
 * the one variable of Snooze's own that engines do not inherit (autoscaler/local/platform.ts).
 */
export const adminTokenEnv = "SNOOZE_ADMIN_TOKEN";
