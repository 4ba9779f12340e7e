export * from './types';
export { sternaPolicy } from './sterna';
