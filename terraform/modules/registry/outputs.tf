output "repository_urls" {
  description = "Repository URL by name (docker push target)."
  value       = { for k, r in aws_ecr_repository.worker : k => r.repository_url }
}

output "repository_arns" {
  description = "Repository ARN by name."
  value       = { for k, r in aws_ecr_repository.worker : k => r.arn }
}
